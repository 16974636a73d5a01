"""Authoring tasks and configurations: import a Yard-style manifest, draft tasks from commits,
promote a configuration into the factory."""
