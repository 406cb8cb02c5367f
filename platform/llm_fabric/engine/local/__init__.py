"""The local engines: vLLM on the CPU with a tiny random-weight model, an SGLang stand-in, a known traffic burst.

For the demo, the tests and a laptop; nothing here is deployed. May import the foundation only.
"""
