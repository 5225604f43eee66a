"""Where hosts come from: command-line targets, inventory files, EC2 discovery."""

from .inventory import load_inventory, parse_target, targets_from_args

__all__ = ["load_inventory", "parse_target", "targets_from_args"]
