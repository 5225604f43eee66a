"""One module per CLI command: each exposes `register(subparsers)` and sets `func(args, env) -> int`."""
