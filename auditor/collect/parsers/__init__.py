"""Pure parsers: raw probe sections in, facts out. No network, no local filesystem."""
