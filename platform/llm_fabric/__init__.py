"""llm-fabric: a declarative GitOps platform for a bring-your-own-hardware LLM serving federation."""

__version__ = "0.1.0"
