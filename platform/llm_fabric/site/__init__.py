"""The site repo: the federation's desired state as a git repository of YAML files."""
