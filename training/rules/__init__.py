"""The training side's rules as pure functions (no Django, no torch): mixtures, rewards, advantages."""
