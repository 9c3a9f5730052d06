"""Fault injection (HPAS-style injectors) and `validate`: how often tailscope names the right cause."""
