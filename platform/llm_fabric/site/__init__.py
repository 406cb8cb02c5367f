"""The site repo: the federation's desired state as a git repository of YAML files.

Holds the models, the loader (every problem with file, line and field), JSON schemas, git access
and the vocabulary of validation findings. Imports no feature package (only the foundation): the
checks that need features live in them and are run by `llm_fabric.validate`.
"""
