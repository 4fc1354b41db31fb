// Reading a server-sent event stream: the `data:` payload of each event, in order.
export async function* sseData(body: ReadableStream<Uint8Array<ArrayBuffer>>): AsyncGenerator<string> {
  let buf = "";
  for await (const part of body.pipeThrough(new TextDecoderStream())) {
    buf += part;
    let at;
    while ((at = buf.indexOf("\n\n")) >= 0) {
      const event = buf.slice(0, at);
      buf = buf.slice(at + 2);
      const data = event.split("\n").filter((l) => l.startsWith("data:")).map((l) =>
        l.slice(5).replace(/^ /, "")
      ).join("\n");
      if (data) yield data;
    }
  }
}
