"""Teams: a coordinator with members as tools, or a swarm of peers handing off."""

from plait.team.inherit import Inherit, InheritPolicy
from plait.team.team import Team

__all__ = ["Inherit", "InheritPolicy", "Team"]
