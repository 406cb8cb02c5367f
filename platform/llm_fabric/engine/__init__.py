"""Engine recipes (engine/models/*.yaml), the capacity model and vLLM engine arguments."""
