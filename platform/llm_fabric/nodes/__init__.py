"""Node operations on enrolled machines: provision and drain (Ansible playbooks), retire.

One implementation of each: `provision` (provision.yml, drain.yml) and `retire` (drain, then mark
the manifest retired under the registry lock). May import deploy, enrollment, hardware, signing,
site, playbook_runner and the foundation.
"""
