# The deploy test's client host: the `openai` package against the gateway over HTTPS, trusting
# the network's CA through SSL_CERT_FILE (OPENAI_BASE_URL, OPENAI_API_KEY as docs/deploy.md sets
# them). "many": the questions in DEPLOY_QUESTIONS (JSON) at once, greedy, one JSON line of texts.
# "stream": one question streamed, a JSON line per piece as it comes, then {"done": text}.
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import openai

client = openai.OpenAI(max_retries=0, timeout=600)
model = client.models.list().data[0].id
questions = json.loads(os.environ["DEPLOY_QUESTIONS"])
max_tokens = int(os.environ["DEPLOY_MAX_TOKENS"])


def ask(q):
    try:
        r = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": q}], temperature=0, max_tokens=max_tokens
        )
    except openai.APIError as e:
        # one short line a failure report keeps whole: the status and the gateway's own words
        status = getattr(e, "status_code", None)
        sys.exit(f"deploy_chats: {q!r}: {type(e).__name__} {status or ''}: {e.message} {e.body or ''}")
    return r.choices[0].message.content


if sys.argv[1] == "many":
    with ThreadPoolExecutor(len(questions)) as pool:
        print(json.dumps(list(pool.map(ask, questions))), flush=True)
else:
    text = ""
    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": questions[0]}],
        temperature=0,
        max_tokens=max_tokens,
        stream=True,
    )
    for chunk in stream:
        piece = chunk.choices[0].delta.content if chunk.choices else None
        if piece:
            text += piece
            print(json.dumps({"piece": piece}), flush=True)
    print(json.dumps({"done": text}), flush=True)
