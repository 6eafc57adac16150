"""Model hosts (issue #32): serve trained checkpoints unattended.

`manage.py model_host` (host.py) claims the checkpoint versions that need serving, runs a server for
each (vLLM where it and a GPU are here, else the built-in server.py), registers the endpoint once it
answers, restarts a server that dies and stops those nobody uses any more.
"""
