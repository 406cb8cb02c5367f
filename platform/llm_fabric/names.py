"""Names and numbers that cross processes: defined once here, read by the builders that render them and by
the runtimes (in the engine pod, in LiteLLM's proxy, in the prober) that act on them.

Standard library only and importing nothing of the fabric, so every runtime may import it.
"""

from __future__ import annotations

# The gateway re-reads the prober's rotation this often; a replica's preStop waits one period longer,
# so no new request is routed to it once it drains (serving.probes, gateway.runtime.rotation).
ROTATION_REFRESH_S = 5.0
