// Sample requests' schemas, shared by the suite and the benches: a function to call and a JSON
// Schema with nested objects, an enum and an array (strings bounded, so that a sampled answer ends).

export const WEATHER_TOOL = {
  type: "function" as const,
  function: {
    name: "get_weather",
    description: "The current weather in a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string", maxLength: 40 } },
      required: ["city"],
      additionalProperties: false,
    },
  },
};

export const PERSON_SCHEMA = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 24 },
    address: {
      type: "object",
      properties: { city: { type: "string", maxLength: 24 }, zip: { type: "integer", minimum: 0 } },
      required: ["city", "zip"],
      additionalProperties: false,
    },
    color: { enum: ["red", "green", "blue"] },
    tags: { type: "array", items: { type: "string", maxLength: 12 }, maxItems: 3 },
  },
  required: ["name", "address", "color", "tags"],
  additionalProperties: false,
};

/** A get_weather call for Paris and its result, as a client sends them back. */
export function weatherRoundTrip(result: string) {
  return [
    { role: "user" as const, content: "What is the weather like in Paris today?" },
    {
      role: "assistant" as const,
      content: null,
      tool_calls: [{
        id: "call_1",
        type: "function" as const,
        function: { name: "get_weather", arguments: '{"city":"Paris"}' },
      }],
    },
    { role: "tool" as const, tool_call_id: "call_1", content: result },
  ];
}
