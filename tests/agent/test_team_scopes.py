"""What a team is for memories: the workspace (team_id), or the organisation (org_id) when
the operator made it the team. Writes go to the chosen one; both are read, so that switching
loses nothing, and a person without an organisation keeps their workspace's."""

from __future__ import annotations

from agent.protocols import RunContext


def ctx(*, team: str | None = "T1", org: str | None = "E1", org_team: bool) -> RunContext:
    return RunContext(
        conversation_id="slack:T1:C1:-",
        platform="slack",
        user_id="U1",
        chat_id="C1",
        team_id=team,
        org_id=org,
        org_team=org_team,
        is_direct=False,
    )


def test_the_workspace_stays_the_default_team_with_unchanged_keys() -> None:
    context = ctx(org_team=False)
    assert context.write_scope("team") == "team:slack:T1"
    assert context.readable_scopes() == ["chat:slack:C1", "team:slack:T1", "team:slack:E1"]
    plain = ctx(org=None, org_team=False)
    assert plain.readable_scopes() == ["chat:slack:C1", "team:slack:T1"]


def test_the_organisation_as_the_team_is_written_and_read_first() -> None:
    context = ctx(org_team=True)
    assert context.write_scope("team") == "team:slack:E1"
    assert context.readable_scopes() == ["chat:slack:C1", "team:slack:E1", "team:slack:T1"]
    assert context.write_scope() == "chat:slack:C1"  # unsaid: this chat's, as before


def test_a_workspace_in_no_organisation_keeps_its_own() -> None:
    context = ctx(org=None, org_team=True)
    assert context.write_scope("team") == "team:slack:T1"
    assert context.readable_scopes() == ["chat:slack:C1", "team:slack:T1"]
    nobody = ctx(team=None, org=None, org_team=True)
    assert nobody.readable_scopes() == ["chat:slack:C1"]
    assert nobody.write_scope("team") == "chat:slack:C1"
