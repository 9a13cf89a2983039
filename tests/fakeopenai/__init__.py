"""A real HTTP server on 127.0.0.1 that speaks enough of the OpenAI API for tests and benchmarks.

Why a real server and not a mock: the openai 3.x client talks through httpx2, and the behaviour we
most need to exercise (retries, Retry-After parsing, timeouts, response parsing, connection pooling,
many workers in parallel) lives below any patchable Python API. So tests point the unmodified client
at this server, exactly as production points it at a provider::

    with FakeOpenAI(latency=0.05) as fake:
        fake.script("What is 10*10?", ["100", "105"])
        fake.rule("Rate the answer", "SCORE: 4")
        fake.fail_next(1, status=429, retry_after=0.1)
        client = openai.OpenAI(base_url=fake.base_url, api_key="test", max_retries=0)
        ...

Endpoints: ``POST /v1/chat/completions``, ``POST /v1/embeddings``, ``GET /v1/models`` (``fail_models()``
makes it answer an error status instead).

How a chat request is answered, first match wins:

1. Auth: if ``api_key`` was given and ``Authorization`` is not ``Bearer <api_key>`` -> 401, whose message
   quotes the key it was sent, as some providers do ("Incorrect API key provided: <key>").
2. ``down()`` -> 503 immediately.
3. ``storm()``: each request fails with 429 (``Retry-After``) or 500 at the given rates (seeded, after the
   usual latency) until ``storm()`` is called with no rates.
4. ``fail_next()`` faults: the oldest pending fault whose ``first_user`` filter matches consumes one
   unit and the request fails with its status (after the usual latency), or, for a ``hang`` fault,
   sleeps ``hang`` seconds and is then answered normally (the client has usually timed out by then), or,
   for a ``reply`` fault, is answered with that Reply (a malformed 200, say).
   ``misbehave(reply)`` answers every request so until ``misbehave()`` with no reply.
5. Reply selection, which produces a ``Reply``:

   a. Scripts (``script(first_user, replies)``): if the conversation key equals ``first_user``, the
      reply is ``replies[number of assistant messages in the request]`` (clamped to the last one).
      Being stateless is deliberate: a retried or redelivered request gets the same reply.
   b. Rules (``rule(contains, reply)``): the first rule whose ``contains`` occurs (case-sensitive)
      in the LAST message's content. Meant for judge and simulated-user prompts. ``where="system"``
      looks in the system message(s) instead, ``where="any"`` in any message. A list of replies
      makes the rule stateful: each request it answers takes the next reply, cycling round (for
      flaky models); ``model=`` limits a rule to requests for that model. One server can so play
      the agent (scripts), the simulated user (a rule on its system prompt) and the judge.
   c. With ``tools`` in the request: tool calls (``replies.tool_reply``). After the user's message it calls
      the first offered tool, its required arguments made from the message (a string: the message's last
      capitalised word after the first, "Paris" in "Weather in Paris?"; a number 1; a boolean true);
      after ``tool_rounds`` rounds of results (default 1) it answers in text that quotes them all:
      "Tool results: <result> | <result>". A script or rule may answer with ``Reply(tool_calls=[...])``.
   d. ``default_reply`` ("OK").

   The Reply may itself be an error (``status``), a hang, or carry latency/usage overrides; or it may be
   a 200 that is no ordinary reply: a ``finish_reason`` other than stop, a ``refusal``, ``null_content``,
   other ``choices`` (none, a choice without a message) or a ``raw`` body (an HTML page, JSON cut short).

The conversation key is the content of the first message with role "user". Content given as a list
of parts is reduced to its text parts joined with "\\n".

``refuse(param)``: a chat request whose body carries ``param`` is answered 400 at once, in OpenAI's words
("Unsupported parameter: 'seed' is not supported with this model."), after auth and ``down()``, before the rest.
``requests`` logs every request's body and headers; ``chat_requests()`` and ``chat_headers()`` read them.

``stop()`` is a model server that goes away: connections are refused, and requests in flight are dropped
unanswered (no 200 a dead server never sent). ``start()`` again serves on the same port.

Run standalone for manual poking: ``python -m tests.fakeopenai --port 8900 --latency 0.1``.

The package: ``replies`` (what it answers with, and reading a request), ``server`` (FakeOpenAI and its
HTTP handler), ``__main__`` (the standalone server).
"""

from tests.fakeopenai.replies import EMBEDDING_DIMENSIONS, Reply
from tests.fakeopenai.server import FakeOpenAI

__all__ = ["FakeOpenAI", "Reply", "EMBEDDING_DIMENSIONS"]
