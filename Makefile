# make demo  - run the main job on the embedded reference federation (seed 000)
# make test  - install everything the tests need, then pytest, mypy (strict) and ruff
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
APT_PACKAGES := prometheus openssh-server iproute2 git

.PHONY: demo test venv system-deps pytest typecheck lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# apt only for what is missing: a machine that has them is not touched
system-deps:
	@missing=""; \
	command -v prometheus >/dev/null || missing="$$missing prometheus"; \
	command -v promtool   >/dev/null || missing="$$missing prometheus"; \
	command -v sshd >/dev/null || [ -x /usr/sbin/sshd ] || missing="$$missing openssh-server"; \
	command -v ip  >/dev/null || [ -x /usr/sbin/ip ] || missing="$$missing iproute2"; \
	command -v git >/dev/null || missing="$$missing git"; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -q && apt-get install -y -q --no-install-recommends $$missing; \
	fi

demo: venv system-deps
	bash demo/run.sh

pytest: venv system-deps
	@$(BIN)/pytest; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc

typecheck: venv
	$(BIN)/mypy

lint: venv
	$(BIN)/ruff check platform tests bench stacks

test: pytest typecheck lint

clean:
	rm -rf $(VENV) .demo .mypy_cache .ruff_cache .pytest_cache
