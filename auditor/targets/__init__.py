"""Where hosts come from: command-line targets and inventory files (inventory.py), EC2 discovery (ec2.py),
and their typed resolution into the hosts of a run (resolve.py). Nothing is imported here, so that
`ami-auditor --help` does not load YAML.
"""
