"""`tailscope trace`: OpenMP regions of an unmodified program through the OMPT tool (native/ompt), with memory
placement per region and socket, traffic between sockets, and OTF2 / Chrome-trace exports (seed 004)."""
