"""The AWS API room: clients, error mapping and paginators (api.py), and SSM's API-level helpers
(ssm.py). `targets/` and `transport/` both build on it; it imports neither."""
