from tailscope.cli import entry

entry()
