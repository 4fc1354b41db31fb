// A model whose chat template knows tools, for the gateway's template path: SmolLM2 with a
// ChatML template (written here) that lists the functions in <tools></tools> and has calls
// written as <tool_call>{"name", "arguments"}</tool_call>, results as <tool_response>. The
// weights are SmolLM2's own; only the header's template differs.
import { parseGgufHeader } from "../../src/gguf/reader.ts";
import { type MetadataEntry, writeGguf } from "../../src/gguf/writer.ts";

export const TOOL_TEMPLATE = `{%- if tools %}<|im_start|>system
{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] }}

{% endif %}You can call functions to answer. They are listed in <tools></tools>, each with the JSON Schema of its arguments:
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools>

To call one, write its name and arguments as JSON between <tool_call></tool_call> tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
{% elif messages[0]['role'] == 'system' %}<|im_start|>system
{{ messages[0]['content'] }}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% elif message.role == 'assistant' %}<|im_start|>assistant
{% if message.content %}{{ message.content }}{% endif %}
{%- if message.tool_calls %}{% for call in message.tool_calls %}{% if call.function is defined %}{% set call = call.function %}{% endif %}
<tool_call>
{"name": "{{ call.name }}", "arguments": {{ call.arguments | tojson }}}
</tool_call>{% endfor %}{% endif %}<|im_end|>
{% elif message.role == 'tool' %}<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}`;

/** The GGUF at `from` with `template` as its chat template, written to `to`. */
export function withChatTemplate(from: string, to: string, template: string): void {
  const bytes = Deno.readFileSync(from);
  const h = parseGgufHeader(bytes);
  const metadata: MetadataEntry[] = [...h.metadata.values()]
    .filter((kv) => kv.key !== "general.alignment")
    .map((kv) =>
      kv.key === "tokenizer.chat_template"
        ? [kv.key, template, "string"]
        : [kv.key, kv.value as never, kv.type]
    );
  const tensors = h.tensors.map((t) => ({
    name: t.name,
    shape: t.shape,
    type: t.type,
    data: bytes.subarray(t.offset, t.offset + t.size),
  }));
  Deno.writeFileSync(to, writeGguf({ metadata, tensors, alignment: h.alignment }));
}
