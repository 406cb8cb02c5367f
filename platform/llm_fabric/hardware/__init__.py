"""What the fabric knows of GPUs: the catalog (enrollment/gpus.yaml) and the kernel matrix (kernels/).

Data an operator edits, read into models. May import the foundation only; engine, plan, enrollment
and nodes read it.
"""
