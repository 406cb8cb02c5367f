"""Enrollment: facts from a contributed machine, the GPU catalog, admission, signed node manifests."""
