"""Calling model endpoints: which URLs may be called (url_safety), the one bounded HTTP client
(safe_http) and asking a chat endpoint for a JSON answer (chat). Below the models: nothing here
imports flywheel.models; callers pass the model version they looked up."""
