"""The site gateway's Kubernetes objects: the LiteLLM proxy's Deployment, Service, config and Secrets
(`gateway`), the shared counter store (`counters`) and the inference extension's objectives
(`inference_objectives`). Built at config time from `gateway.config`; nothing here runs in the proxy."""
