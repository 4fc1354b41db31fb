// Placement where a model may be cut only at some layers (glm-dsa: at its full indexer layers).
// The planner works layer by layer, so it plans over the pieces between allowed cuts as if
// each were a layer, and its spans map back to layers: every range then starts and ends where
// the model may be cut.
import { cutRefusal, type CutRule } from "../../gguf/cut-points.ts";
import { type Participant, type Placement, type PlacementModel, planSteps, type Span } from "./placement.ts";
import type { Steps } from "../steps.ts";

export function* planAtCuts(
  model: PlacementModel,
  participants: readonly Participant[],
  fixed: readonly Span[],
  cuts: CutRule | undefined,
): Steps<Placement> {
  if (!cuts) return yield* planSteps(model, participants, fixed);
  const bounds = [0];
  for (let l = 1; l < model.nLayer; l++) if (!cutRefusal(cuts, l)) bounds.push(l);
  bounds.push(model.nLayer);
  const toLayers = (s: Span): Span => ({ start: bounds[s.start], end: bounds[s.end] });
  // a span that does not fall on cuts (none should: registrations are checked) is not held
  const toPieces = (s: Span): Span | undefined => {
    const start = bounds.indexOf(s.start), end = bounds.indexOf(s.end);
    return start >= 0 && end > start ? { start, end } : undefined;
  };
  const pieces: PlacementModel = {
    nLayer: bounds.length - 1,
    fits: (node, s) => model.fits(node, toLayers(s)),
    work: (s) => model.work(toLayers(s)),
  };
  const planned = yield* planSteps(
    pieces,
    participants.map((p) => ({ ...p, current: p.current && toPieces(p.current) })),
    fixed.flatMap((s) => toPieces(s) ?? []),
  );
  return new Map([...planned].map(([node, s]) => [node, s && toLayers(s)]));
}
