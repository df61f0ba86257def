"""Every Redis key the service writes, with the rule that bounds it.

Keys of one conversation share a `{hash tag}` so the Lua scripts that touch several of them
run on one slot of a Redis Cluster. `PATTERNS` lists each family with its bound; a test
checks every key a realistic run leaves behind against it.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.runtime.codec import as_text


@dataclass(frozen=True)
class Keys:
    prefix: str = "parley"

    # --- inbox -------------------------------------------------------------------------
    def dedup(self, event_id: str) -> str:
        # Tagged with the inbox's name: one script checks the id and appends to the stream.
        return f"{self.prefix}:dedup:{{{self.inbox}}}:{event_id}"

    @property
    def inbox(self) -> str:
        return f"{self.prefix}:inbox"

    @property
    def dead_letters(self) -> str:
        return f"{self.prefix}:deadletter"

    # --- one conversation -------------------------------------------------------------------
    def conversation(self, conversation_id: str, part: str) -> str:
        return f"{self.prefix}:conv:{{{conversation_id}}}:{part}"

    def lock(self, conversation_id: str) -> str:
        return self.conversation(conversation_id, "lock")

    def fence(self, conversation_id: str) -> str:
        return self.conversation(conversation_id, "fence")

    def session(self, conversation_id: str) -> str:
        return self.conversation(conversation_id, "session")

    def backlog(self, conversation_id: str) -> str:
        return self.conversation(conversation_id, "backlog")

    def untried(self, conversation_id: str) -> str:
        """Backlog members on their first delivery that no holder has been told of yet."""
        return self.conversation(conversation_id, "untried")

    def journal(self, conversation_id: str, run_id: str) -> str:
        """Approved tool calls of one run: started, finished and their results."""
        return self.conversation(conversation_id, f"journal:{run_id}")

    def attempts(self, conversation_id: str) -> str:
        return self.conversation(conversation_id, "attempts")

    def shown_list(self, conversation_id: str, user_id: str) -> str:
        """The numbered /memories list a person last saw here (bot/conversation/shown.py)."""
        return self.conversation(conversation_id, f"shown:{user_id}")

    def stop(self, conversation_id: str) -> str:
        """The newest request to stop the conversation's run (bot/runtime/stops.py)."""
        return self.conversation(conversation_id, "stop")

    @property
    def stops(self) -> str:
        """The channel stop requests are published on."""
        return f"{self.prefix}:stops"

    def session_anchor(self, conversation_id: str) -> str:
        """The thread of the conversation's newest platform agent session (Slack)."""
        return self.conversation(conversation_id, "agent-session")

    def agent_session(self, session_id: str) -> str:
        """A platform agent session (its chat and thread) → its conversation's thread."""
        return f"{self.prefix}:agent-session:{session_id}"

    def slack_install(self, which: str) -> str:
        """A Slack installation (`team:<id>` or `org:<enterprise id>`), encrypted."""
        return f"{self.prefix}:slack-install:{which}"

    def slack_grid_team(self, team_id: str) -> str:
        """The organisation of a workspace served by an org-wide install."""
        return f"{self.prefix}:slack-grid-team:{team_id}"

    @property
    def slack_installs_removed(self) -> str:
        """A counter raised by every removal of a Slack installation: each process's cached
        tokens are stale once it moves."""
        return f"{self.prefix}:slack-installs-removed"

    def slack_oauth_state(self, state: str) -> str:
        """An OAuth state of a Slack install under way, good once."""
        return f"{self.prefix}:slack-oauth-state:{state}"

    def agent_session_created(self, session_id: str) -> str:
        """Set once a platform agent session was created (its title given): later runs in it
        leave the title alone."""
        return f"{self.prefix}:agent-session-created:{session_id}"

    def history_limited(self, conversation_id: str) -> str:
        """Set once the person was told the thread's history could not be read (rate limit)."""
        return self.conversation(conversation_id, "history-limited")

    def thread_seen(self, conversation_id: str) -> str:
        """The newest thread message Parley saw, so it reads only what came after it."""
        return self.conversation(conversation_id, "seen")

    # --- decisions, delivery, reminders, leases ------------------------------------------
    def decision(self, decision_id: str) -> str:
        return f"{self.prefix}:decision:{decision_id}"

    def pending(self, kind: str) -> str:
        return f"{self.prefix}:decisions:pending:{kind}"

    def outbox(self, key: str) -> str:
        return f"{self.prefix}:outbox:{key}"

    @property
    def undelivered(self) -> str:
        """Before parked replies were due work: their outbox keys, scored by when to try
        them next. Emptied into `undelivered_due` by the first redelivery pass."""
        return f"{self.prefix}:undelivered"

    @property
    def undelivered_due(self) -> str:
        """Parked replies' outbox keys by when to try them next."""
        return f"{self.prefix}:{{undelivered}}:due"

    @property
    def undelivered_claimed(self) -> str:
        return f"{self.prefix}:{{undelivered}}:claimed"

    def undelivered_message(self, key: str) -> str:
        return f"{self.prefix}:undelivered:{key}"

    @property
    def reminders_due(self) -> str:
        return f"{self.prefix}:{{reminders}}:due"

    @property
    def reminders_claimed(self) -> str:
        return f"{self.prefix}:{{reminders}}:claimed"

    def reminder(self, reminder_id: str) -> str:
        return f"{self.prefix}:reminder:{reminder_id}"

    @property
    def reoffers_due(self) -> str:
        """Unanswered ephemeral prompts (Telegram) by when to offer them again."""
        return f"{self.prefix}:{{reoffers}}:due"

    @property
    def reoffers_claimed(self) -> str:
        return f"{self.prefix}:{{reoffers}}:claimed"

    def reoffer(self, member: str) -> str:
        """A prompt's offer; `:copies` the copies made of it, `:sent` whom they went to."""
        return f"{self.prefix}:reoffer:{member}"

    @property
    def tasks_due(self) -> str:
        """Followed MCP tasks by their next `tasks/get`."""
        return f"{self.prefix}:{{mcptasks}}:due"

    @property
    def tasks_claimed(self) -> str:
        return f"{self.prefix}:{{mcptasks}}:claimed"

    def followed_task(self, task_key: str) -> str:
        return f"{self.prefix}:mcptask:{task_key}"

    # --- schedules ---------------------------------------------------------------------------
    @property
    def schedules_due(self) -> str:
        """Active schedules by their next slot; tagged with the inbox's name, so one script
        moves a schedule on and queues its run."""
        return f"{self.prefix}:schedules:{{{self.inbox}}}:due"

    @property
    def schedules_claimed(self) -> str:
        """Schedules whose due slot a clock is starting, by the end of its lease."""
        return f"{self.prefix}:schedules:{{{self.inbox}}}:claimed"

    def schedule(self, schedule_id: str) -> str:
        return f"{self.prefix}:schedule:{schedule_id}"

    @property
    def schedules_all(self) -> str:
        return f"{self.prefix}:schedules:all"

    @property
    def schedules_paused(self) -> str:
        return f"{self.prefix}:schedules:paused"

    def schedules_in(self, chat: str) -> str:
        """A chat's schedules (`platform:team:chat`, every thread of it)."""
        return f"{self.prefix}:schedules:conv:{chat}"

    def schedules_of(self, platform: str, owner_id: str) -> str:
        """A person's schedules, in every chat (their cap)."""
        return f"{self.prefix}:schedules:owner:{platform}:{owner_id}"

    def lease(self, name: str) -> str:
        return f"{self.prefix}:lease:{name}"

    # --- per-user MCP servers (bot/features/connections/store.py) -----------------------------
    def oauth_token(self, server: str, platform: str, user_id: str) -> str:
        return f"{self.prefix}:oauth:token:{server}:{platform}:{user_id}"

    def oauth_client(self, server: str) -> str:
        return f"{self.prefix}:oauth:client:{server}"

    def oauth_refresh(self, server: str, platform: str, user_id: str) -> str:
        """Held while one of a person's tokens is refreshed (a redis-py lock)."""
        return f"{self.prefix}:oauth:refresh:{server}:{platform}:{user_id}"

    def oauth_state(self, digest: str) -> str:
        return f"{self.prefix}:oauth:state:{digest}"

    def oauth_held(self, platform: str, user_id: str, digest: str) -> str:
        """A sign-in that came back, waiting for its person to confirm it in the chat (the
        SHA-256 of their one-time code)."""
        return f"{self.prefix}:oauth:held:{platform}:{user_id}:{digest}"

    def oauth_holding(self, platform: str, user_id: str) -> str:
        """The digests of a person's held sign-ins (a set)."""
        return f"{self.prefix}:oauth:holding:{platform}:{user_id}"

    def oauth_tries(self, platform: str, user_id: str) -> str:
        """Wrong codes a person typed while sign-ins of theirs were held (bounded)."""
        return f"{self.prefix}:oauth:tries:{platform}:{user_id}"

    def oauth_registration(self, digest: str) -> str:
        """Parley's client at one authorization server (the issuer's SHA-256)."""
        return f"{self.prefix}:oauth:registration:{digest}"

    def oauth_step_up(self, server: str, platform: str, user_id: str) -> str:
        """How many sign-ins for more scope a person was sent lately (bounded)."""
        return f"{self.prefix}:oauth:stepup:{server}:{platform}:{user_id}"

    def standing(self, platform: str, user_id: str) -> str:
        """A person's standing approvals (bot/features/standing.py), a field each."""
        return f"{self.prefix}:standing:{platform}:{user_id}"

    # --- Telegram pairing (bot/runtime/pairing.py) -------------------------------------
    def paired(self, platform: str) -> str:
        return f"{self.prefix}:paired:{platform}"

    def pairing_code(self, code: str) -> str:
        return f"{self.prefix}:pairing:code:{code}"

    def pairing_pending(self, platform: str, user_id: str) -> str:
        return f"{self.prefix}:pairing:user:{platform}:{user_id}"

    def pairing_queue(self, platform: str) -> str:
        return f"{self.prefix}:pairing:queue:{platform}"


def backlog_member(entry_id: str) -> str:
    """An inbox entry as a backlog member: zero-padded, so lexical order is entry order."""
    ms, _, seq = entry_id.partition("-")
    return f"{int(ms):015d}-{int(seq or 0):010d}"


def entry_of(member: bytes | str) -> str:
    """The inbox entry a backlog member stands for."""
    text = as_text(member)
    ms, _, seq = text.partition("-")
    return f"{int(ms)}-{int(seq)}"


# --- Outbox keys (`Keys.outbox` adds the prefix): one reply each, delivered once --------------


def reply_key(owner: str, slot: str) -> str:
    """A reply in `slot` ("outcome", "reply", …) of an inbox entry, or of a conversation for
    what it is told once whichever entry says it."""
    return f"{owner}:{slot}"


def reminder_key(reminder_id: str) -> str:
    return f"reminder:{reminder_id}"


def task_key(task: str, slot: str | None = None) -> str:
    """The end of a followed MCP task, or another of its messages (`later`)."""
    return f"mcptask:{task}" if slot is None else f"mcptask:{task}:{slot}"


# --- Event ids (`Keys.dedup` adds the prefix): one event each, taken once ---------------------


def schedule_event(schedule_id: str, slot: int) -> str:
    """A schedule's slot: the same for every worker that races to start it."""
    return f"schedule:{schedule_id}:{slot}"


def schedule_slot_of(event_id: str) -> tuple[str, int]:
    """The schedule id and slot in a `schedule_event` id."""
    _, schedule_id, slot = event_id.split(":", 2)
    return schedule_id, int(slot)


def trigger_event(name: str, delivery: str) -> str:
    return f"hook:{name}:{delivery}"


def trigger_of(event_id: str) -> str:
    """The trigger's name in a `trigger_event` id."""
    return event_id.split(":", 2)[1]


def connected_event(question_id: str) -> str:
    """An account connected for the question `question_id` asked."""
    return f"connected:{question_id}"


def private_press_event(event_id: str) -> str:
    """A press on a private prompt, handed to the conversation the prompt is about."""
    return f"{event_id}:from-private"


# key pattern (after the prefix) → what bounds it


PATTERNS: dict[str, str] = {
    "dedup:*": "ttl",
    "inbox": "retention: MAXLEN-trimmed stream",
    "deadletter": "retention: MAXLEN-trimmed stream",
    "conv:*:lock": "ttl",
    "conv:*:fence": "ttl",
    "conv:*:session": "ttl",
    "conv:*:backlog": "ttl",
    "conv:*:untried": "ttl",
    "conv:*:journal:*": "ttl",
    "conv:*:attempts": "ttl",
    "conv:*:seen": "ttl",
    "conv:*:stop": "ttl",
    "conv:*:shown:*": "ttl",
    "conv:*:agent-session": "ttl",
    "agent-session:*": "ttl",
    "decision:*": "ttl",
    "decisions:pending:*": "retention: members leave when decided or pruned when expired",
    "outbox:*": "ttl",
    "undelivered": "retention: emptied into {undelivered}:due by the first redelivery pass",
    "{undelivered}:due": "retention: members leave when claimed",
    "{undelivered}:claimed": "retention: members leave when delivered or given up",
    "undelivered:*": "ttl",
    "{reminders}:due": "retention: members leave when claimed",
    "{reminders}:claimed": "retention: members leave when delivered",
    "reminder:*": "ttl",
    "{mcptasks}:due": "retention: members leave when claimed",
    "{mcptasks}:claimed": "retention: members leave when their task ends or is dropped",
    "mcptask:*": "ttl",
    "lease:*": "ttl",
    "schedule:*": (
        "retention: until the schedule is cancelled or deleted; TTL PARLEY_SCHEDULE_ORPHAN_DAYS "
        "once paused because its owner or chat is gone"
    ),
    "schedules:*": (
        "retention: members leave when their schedule is cancelled or deleted, or when a "
        "listing meets an id whose record expired"
    ),
    "breaker:*": "ttl",
    "usage:*": "ttl",
    "rate:*": "ttl",
    "memory:doc:*": "retention: PARLEY_MEMORY_MAX_PER_USER / _CHAT / _TEAM per scope",
    "memory:meta": "retention: one key",
    "memory:counts": "retention: one hash, a field per scope",
    "oauth:token:*": "ttl",
    "oauth:client:*": "retention: one per configured per-user server",
    "oauth:state:*": "ttl",
    "oauth:refresh:*": "ttl",
    "oauth:registration:*": "retention: one per authorization server a configured server uses",
    "oauth:stepup:*": "ttl",
    "mcp:pins:*": "retention: one per configured MCP server (its tools' approval classes)",
    "oauth:held:*": "ttl",
    "oauth:holding:*": "ttl",
    "oauth:tries:*": "ttl",
    "standing:*": "ttl",
    "paired:*": "retention: one set per platform, a member per paired person until revoked",
    "pairing:*": "ttl",
}
