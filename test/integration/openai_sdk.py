# The same API through the Python `openai` package: logprobs, n with a seed, a streamed request
# past the context. Run by openai-api.deno.ts with STRATA_GATEWAY and STRATA_KEY; prints JSON.
import json
import os

import openai

client = openai.OpenAI(base_url=os.environ["STRATA_GATEWAY"] + "/v1", api_key=os.environ["STRATA_KEY"], max_retries=0)
messages = [{"role": "user", "content": "What is the capital of France?"}]
out = {"version": openai.__version__}

r = client.chat.completions.create(
    model="smollm2", messages=messages, temperature=0, max_tokens=8, logprobs=True, top_logprobs=5
)
out["logprobs"] = [[c.token, c.logprob, [t.token for t in c.top_logprobs]] for c in r.choices[0].logprobs.content]
out["text"] = r.choices[0].message.content

r = client.chat.completions.create(model="smollm2", messages=messages, temperature=1, max_tokens=12, n=3, seed=7)
out["n"] = [c.message.content for c in r.choices]

try:
    s = client.chat.completions.create(
        model="smollm2", messages=messages, max_tokens=10_000_000, stream=True
    )
    out["past_context"] = {"streamed": [c.model_dump() for c in s]}
except openai.BadRequestError as e:
    out["past_context"] = {"status": e.status_code, "code": e.code}

print(json.dumps(out))
