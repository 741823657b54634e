"""Agent factory: memento compaction on by default."""

from ._factory import create_agent

__all__ = ('create_agent',)
