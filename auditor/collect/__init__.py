"""What to ask a host: the probe, its sections, pure parsers, and the fact schema."""
