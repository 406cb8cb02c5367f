"""Enrollment: facts from a contributed machine (Ansible), parsers, admission, signed node manifests.

Holds facts gathering, tool-output parsers (`parsers/`), inventory assembly, admission, the enroll
flow, the node registry (`registry`: write, verify, sign manifests in the site repo) and the table of
the tier each catalog GPU gets (`tier_table`, `fabric gpus`). May import
hardware, signing, site, playbook_runner and the foundation.
"""
