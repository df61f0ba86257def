"""PARLEY_SLACK_TEAM_MEMORIES=organisation: memories shared with the team are the Enterprise
Grid organisation's, so people of any of its workspaces share them. bolt-python's org-wide
`app_mention` (tests/corpus/slack) re-addressed to people of several workspaces, through the
real slack-bolt adapter, the fake Slack, the real runtime, Redis and local embedding model.

Break it: a Slack Connect guest of another organisation in the host's channel, and a
workspace outside the organisation, never read or write its team memories, and a guest's
button press does not count as the host organisation's; team memories
kept per workspace before the switch stay readable (to that workspace only), and the
organisation's stay readable after switching back."""

from __future__ import annotations

import json
import logging
from itertools import count
from typing import Any
from urllib.parse import parse_qs, urlencode

import pytest
import redis.asyncio as aioredis

from agent.protocols import RunContext
from memory import Embedder, RedisMemoryStore, open_store
from tests.adapters.test_slack import SECRET, Slack, slack_bot, until
from tests.adapters.test_slack_org_installs import org_mention
from tests.agent.scripted import ScriptedModel, call, reply, turn
from tests.fakes import slack as fs

pytestmark = pytest.mark.network  # a fake Slack on a local port

ORG = {"team_memories": "organisation"}  # PARLEY_SLACK_TEAM_MEMORIES, as platforms.py passes it
VPN = "The VPN host is vpn.example.com"
_ids = count(1)


def mention(
    user: str,
    team: str,
    channel: str,
    text: str,
    *,
    enterprise: str | None = "E111",
    guest_of: str | None = None,
) -> dict[str, Any]:
    """bolt-python's org-wide mention, said by `user` of workspace `team` in `channel`.
    `enterprise=None`: a workspace in no organisation (a plain workspace install).
    `guest_of`: a Slack Connect channel of that host workspace, `team` the guest's own."""
    body = org_mention()
    number = next(_ids)
    body["event_id"] = f"EvOrg{number}"
    ts = fs.message_ts()
    body["event"] |= {
        "user": user,
        "team": guest_of or team,
        "channel": channel,
        "text": f"<@{fs.BOT_USER}> {text}",
        "ts": ts,
        "event_ts": ts,
        "client_msg_id": f"msg-{number}",
    }
    body["team_id"] = guest_of or team
    if guest_of is not None:
        body["is_ext_shared_channel"] = True
        body["event"] |= {"user_team": team, "source_team": team}
    if enterprise is None:
        del body["enterprise_id"]
        body["authorizations"] = [
            {
                "enterprise_id": None,
                "team_id": team,
                "user_id": fs.BOT_USER,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ]
    elif enterprise != "E111":
        body["enterprise_id"] = enterprise
        body["authorizations"][0]["enterprise_id"] = enterprise
    return body


async def send(s: Slack, body: dict[str, Any]) -> None:
    raw = json.dumps(body).encode()
    async with s.http.post(s.url, data=raw, headers=fs.signed(SECRET, raw)) as answer:
        assert answer.status == 200


async def asked(s: Slack, body: dict[str, Any], model: ScriptedModel) -> str:
    """Say it, wait for the run; the system prompt of its first model call (what recall
    gave it)."""
    before = len(model.turn_requests)
    await send(s, body)
    await until(lambda: len(model.turn_requests) > before, within=15)
    await s.harness.settle()
    return model.turn_requests[before].system


async def command(s: Slack, user: str, team: str, text: str, channel: str) -> str:
    """`/parley <text>` from an org-wide install (Slack adds the organisation to the form)."""
    before = len(s.fake.responses)
    url = s.fake.response_url(f"org-cmd{before}")
    form = parse_qs(fs.slash_command(user, text, channel=channel, team=team, response_url=url))
    fields = {k.decode(): v[0].decode() for k, v in form.items()}
    fields |= {"enterprise_id": "E111", "is_enterprise_install": "true"}
    await s.form(urlencode(fields).encode())
    await until(lambda: len(s.fake.responses) > before, within=15)
    await s.harness.settle()
    return str(s.fake.responses[before]["text"])


async def approve(s: Slack, post: fs.Post, user: str, team: str, host: str | None = None) -> None:
    """Approve on an org-wide install: the press names the organisation. `host`: the
    workspace of a Slack Connect channel the person (of `team`) is a guest in."""
    form = parse_qs(fs.block_action(post, "Approve", user=user, team=host or team))
    payload = json.loads(form[b"payload"][0])
    payload |= {"enterprise": {"id": "E111"}, "is_enterprise_install": True}
    payload["user"]["team_id"] = team
    await s.form(urlencode({"payload": json.dumps(payload)}).encode())


def person(user: str, team: str, channel: str, org: str | None, *, org_team: bool) -> RunContext:
    return RunContext(
        conversation_id=f"slack:{team}:{channel}:-",
        platform="slack",
        user_id=user,
        chat_id=channel,
        team_id=team,
        org_id=org,
        org_team=org_team,
        is_direct=False,
    )


async def scopes(store: RedisMemoryStore, context: RunContext) -> dict[str, str]:
    return {m.text: m.scope for m in (await store.list_memories(context)).records}


async def test_an_organisation_shares_team_memories_across_its_workspaces(
    redis: aioredis.Redis, embedder: Embedder
) -> None:
    """Ana (T111) shares the VPN host with the team; Ben of another workspace (T222) of the
    same organisation is given it, lists it, asks /why and where it came from; Ana corrects
    it from her channel."""
    store = await open_store(redis, embedder)
    model = ScriptedModel(
        [
            turn(call("remember", "m1", text=VPN, share="team")),
            reply("I'll remember that for everyone."),
            reply("It is vpn.example.com."),
            turn(call("memory_sources", "s1")),
            reply("Someone told me."),
            reply("It is vpn2.example.com."),
        ]
    )
    async with slack_bot(redis, model, memory=store, **ORG) as s:
        s.fake.users.update({"W222": "Ana", "W333": "Ben"})
        await send(s, mention("W222", "T111", "C111", "remember for the whole team: " + VPN))
        await until(lambda: any(p.buttons for p in s.fake.in_channel("C111")), within=15)
        await s.harness.settle()
        prompt = next(p for p in s.fake.in_channel("C111") if p.buttons)
        await approve(s, prompt, "W222", "T111")
        await until(lambda: len(model.turn_requests) == 2, within=15)
        await s.harness.settle()
        ben = person("W333", "T222", "C222", "E111", org_team=True)
        assert await scopes(store, ben) == {VPN: "team:slack:E111"}

        system = await asked(s, mention("W333", "T222", "C222", "what is the VPN host?"), model)
        assert VPN in system
        listed = await command(s, "W333", "T222", "memories", "C222")
        assert f"1. {VPN} (team)" in listed
        why = await command(s, "W333", "T222", "why", "C222")
        assert why.startswith("For my last answer here I used what I remember:") and VPN in why
        await asked(s, mention("W333", "T222", "C222", "where did you get that?"), model)
        sources = model.turn_requests[-1].messages[-1].tool_results[0]
        assert not sources.is_error and VPN in sources.content
        assert "in another conversation" in sources.content  # C111 is not named in C222

        # only the author corrects it, from any workspace of the organisation
        assert "isn't yours" in await command(s, "W333", "T222", "correct 1 nothing", "C222")
        await command(s, "W222", "T111", "memories", "C111")
        fixed = await command(
            s, "W222", "T111", "correct 1 The VPN host is vpn2.example.com", "C111"
        )
        assert fixed.startswith("Corrected:")
        system = await asked(s, mention("W333", "T222", "C222", "and the VPN host now?"), model)
        assert "vpn2.example.com" in system and VPN not in system


async def test_a_slack_connect_guest_and_other_workspaces_never_reach_the_organisations(
    redis: aioredis.Redis, embedder: Embedder
) -> None:
    """A guest of another organisation in the host's shared channel C111 (Bolt names their
    own team, T9EXT, and no organisation of theirs), a workspace of another organisation
    (E999) and one in none (T444) are not given the organisation's team memory; what the
    guest shares with the team reaches their own team only."""
    store = await open_store(redis, embedder)
    ana = person("W222", "T111", "C111", "E111", org_team=True)
    await store.remember(VPN, ana, share="team")
    model = ScriptedModel(
        [
            reply("I don't know."),
            turn(call("remember", "m1", text="Our VPN is guest-vpn.example.com", share="team")),
            reply("Noted for your team."),
            reply("I don't know."),
            reply("I don't know."),
        ]
    )
    async with slack_bot(redis, model, memory=store, **ORG) as s:
        guest = mention("WEXT", "T9EXT", "C111", "what is the VPN host?", guest_of="T111")
        assert VPN not in await asked(s, guest, model)
        shares = mention("WEXT", "T9EXT", "C111", "remember for my team: ours", guest_of="T111")
        await send(s, shares)
        await until(lambda: any(p.buttons for p in s.fake.in_channel("C111")), within=15)
        await s.harness.settle()
        prompt = next(p for p in s.fake.in_channel("C111") if p.buttons)
        # the guest's press names their own team and the host's organisation
        await approve(s, prompt, "WEXT", "T9EXT", host="T111")
        await until(lambda: len(model.turn_requests) == 3, within=15)
        await s.harness.settle()
        other_org = mention("WOUT", "T333", "C333", "what is the VPN host?", enterprise="E999")
        assert VPN not in await asked(s, other_org, model)
        no_org = mention("WSOLO", "T444", "C444", "what is the VPN host?", enterprise=None)
        assert VPN not in await asked(s, no_org, model)
    assert await scopes(store, ana) == {VPN: "team:slack:E111"}
    guest_team = person("WEXT", "T9EXT", "C111", None, org_team=True)
    assert await scopes(store, guest_team) == {
        "Our VPN is guest-vpn.example.com": "team:slack:T9EXT"
    }


async def test_switching_what_a_team_means_loses_no_team_memory(
    redis: aioredis.Redis, embedder: Embedder
) -> None:
    """Before the switch T111 shared a memory with its workspace: after it, T111's people
    still have it and T222's do not (it was said to one workspace). A memory shared with the
    organisation stays with its workspaces after switching back to per-workspace."""
    store = await open_store(redis, embedder)
    before = person("W222", "T111", "C111", "E111", org_team=False)
    await store.remember("Standup is at 10 in T111", before, share="team")
    model = ScriptedModel(
        [
            reply("10."),
            reply("I don't know."),
            turn(call("remember", "m1", text=VPN, share="team")),
            reply("Noted."),
        ]
    )
    async with slack_bot(redis, model, memory=store, **ORG) as s:
        s.fake.users.update({"W222": "Ana"})
        own = await asked(s, mention("W222", "T111", "C111", "when is standup?"), model)
        assert "Standup is at 10 in T111" in own
        other = await asked(s, mention("W333", "T222", "C222", "when is standup?"), model)
        assert "Standup is at 10 in T111" not in other
        await send(s, mention("W222", "T111", "C111", "remember for everyone: " + VPN))
        await until(lambda: any(p.buttons for p in s.fake.in_channel("C111")), within=15)
        await s.harness.settle()
        prompt = next(p for p in s.fake.in_channel("C111") if p.buttons)
        await approve(s, prompt, "W222", "T111")
        await until(lambda: len(model.turn_requests) == 4, within=15)
        await s.harness.settle()
    back = ScriptedModel([reply("vpn.example.com.")])
    async with slack_bot(redis, back, memory=store) as s:  # per workspace again
        system = await asked(s, mention("W333", "T222", "C222", "what is the VPN host?"), back)
        assert VPN in system
    # and a new team memory goes to the workspace again
    ben = person("W333", "T222", "C222", "E111", org_team=False)
    assert ben.write_scope("team") == "team:slack:T222"


async def test_a_guests_button_press_is_not_the_host_organisations(
    redis: aioredis.Redis, embedder: Embedder, caplog: pytest.LogCaptureFixture
) -> None:
    """Only the organisation E111 on the allowlist: Ana's approval prompt in the host's
    shared channel is not pressed by a guest of another organisation (the press names the
    host's organisation, not the guest's), and is by Ana."""
    caplog.set_level(logging.INFO, logger="adapters.slack")
    store = await open_store(redis, embedder)
    model = ScriptedModel([turn(call("remember", "m1", text=VPN, share="team")), reply("Noted.")])
    async with slack_bot(redis, model, memory=store, allowed_teams=("E111",), **ORG) as s:
        await send(s, mention("W222", "T111", "C111", "remember for everyone: " + VPN))
        await until(lambda: any(p.buttons for p in s.fake.in_channel("C111")), within=15)
        await s.harness.settle()
        prompt = next(p for p in s.fake.in_channel("C111") if p.buttons)
        await approve(s, prompt, "WEXT", "T9EXT", host="T111")
        await until(lambda: any("press not taken" in r.getMessage() for r in caplog.records))
        await s.harness.settle()
        assert len(model.turn_requests) == 1
        await approve(s, prompt, "W222", "T111")
        await until(lambda: len(model.turn_requests) == 2, within=15)
        await s.harness.settle()
    ana = person("W222", "T111", "C111", "E111", org_team=True)
    assert await scopes(store, ana) == {VPN: "team:slack:E111"}
