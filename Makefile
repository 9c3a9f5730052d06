# The two commands of the README. Both set up what they need first (scripts/setup is idempotent).
.PHONY: check test test-quick lint

check:  ## run `tailscope check` on this node and write the report
	scripts/setup
	.venv/bin/tailscope check $(ARGS)

test:  ## the whole test suite, slow tests included (what CI runs); first the host it runs on, in a few lines
	scripts/setup --test
	.venv/bin/tailscope facts --host
	.venv/bin/python -m ruff check src tests bench
	.venv/bin/python -m pytest $(ARGS)

test-quick:  ## the suite without tests marked slow
	scripts/setup --test
	.venv/bin/tailscope facts --host
	.venv/bin/python -m pytest -m "not slow" $(ARGS)
