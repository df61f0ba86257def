"""The README's Slack set-up is a step-by-step that works the first time: the steps in the
order Slack needs them, a Socket Mode variant whose manifest change is a valid manifest,
a reason for every scope the manifest asks for, and `/parley`'s hint naming every command."""

from __future__ import annotations

import copy
import json
import re

from jsonschema import Draft7Validator

from bot.conversation.texts import HELP
from tests.deploy.test_deploy_configs import DEPLOY, SLACK_MANIFEST_SCHEMA, documents

README = (DEPLOY.parent / "README.md").read_text()
SECTION = README[README.index("## Connect Slack") : README.index("## How it behaves")]


def test_the_steps_come_in_the_order_slack_needs_them() -> None:
    steps = [
        "Create the app from the manifest",
        "Install it and copy the bot token",
        "Copy the signing secret",
        "Start Parley",
        "Verify the request URL",
        "Invite the bot to channels",
    ]
    places = [SECTION.index(f"**{step}") for step in steps]
    assert places == sorted(places)
    assert "/invite @parley" in SECTION and "`parley doctor`" in SECTION


def test_the_socket_mode_change_it_describes_is_a_valid_manifest() -> None:
    manifest = documents("slack-app-manifest.yaml")[0]
    public = "https://parley.example.com/slack/events"
    named = [
        manifest["features"]["slash_commands"][0]["url"],
        manifest["settings"]["event_subscriptions"]["request_url"],
        manifest["settings"]["interactivity"]["request_url"],
    ]
    assert named == [public] * 3
    assert json.dumps(manifest).count(public) == 3  # "the three lines"
    paragraph = SECTION[SECTION.index("**A first local try with Socket Mode.**") :]
    assert "set `settings.socket_mode_enabled: true` and delete the three lines" in paragraph
    assert "`SLACK_APP_TOKEN`" in paragraph and "`connections:write`" in paragraph

    changed = copy.deepcopy(manifest)
    del changed["features"]["slash_commands"][0]["url"]
    del changed["settings"]["event_subscriptions"]["request_url"]
    del changed["settings"]["interactivity"]["request_url"]
    changed["settings"]["socket_mode_enabled"] = True
    schema = json.loads(SLACK_MANIFEST_SCHEMA.read_text())
    assert [e.message for e in Draft7Validator(schema).iter_errors(changed)] == []


def test_every_scope_the_manifest_asks_for_has_a_reason_in_the_readme() -> None:
    scopes = documents("slack-app-manifest.yaml")[0]["oauth_config"]["scopes"]["bot"]
    table = SECTION[SECTION.index("**Why each scope.**") :]
    rows = re.findall(r"^\| (`[^|]+`) \| ([^|]+) \|$", table, flags=re.MULTILINE)
    explained = {name.strip("`"): why.strip() for names, why in rows for name in names.split(", ")}
    assert set(explained) == set(scopes)
    assert all(len(why) > 10 for why in explained.values())


def test_the_slash_commands_hint_names_every_command_help_offers() -> None:
    command = documents("slack-app-manifest.yaml")[0]["features"]["slash_commands"][0]
    offered = set(re.findall(r"\{p\}(\w+)", HELP))
    hinted = {part.split()[0] for part in command["usage_hint"].split(" | ")}
    assert offered == hinted, offered ^ hinted
    assert {"schedules", "connections"} <= set(re.findall(r"\w+", command["description"]))


def test_the_readme_lists_every_command_telegram_offers() -> None:
    from adapters.telegram.inbound import COMMANDS

    section = README[README.index("## Connect Telegram") : README.index("## Connect Slack")]
    listed = section[section.index("Commands: ") :].split(".\n", 1)[0]
    assert set(re.findall(r"`/(\w+)", listed)) == set(COMMANDS)
