"""The serving stack: its resources are built by llm_fabric.deploy; see docs/deploy.md."""

import pulumi

from llm_fabric.deploy.components import deploy_stack

deploy_stack("serving", pulumi.Config())
