"""What every feature's Kubernetes objects share: the labels and annotations (`labels`), the bundle of
manifests a builder returns (`manifests`), the stack options an operator sets (`options`) and which
sites a stack is for (`sites`). Imports the site repo, the engines' image options and the foundation;
no feature package.
"""
