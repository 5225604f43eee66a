"""Where hosts come from: command-line targets, inventory files, EC2 discovery."""
