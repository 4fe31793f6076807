/**
 * The plain one-line verdict of the toy learning demo (the first screen's "no download" start): read
 * from the measured return curve of `toyTrain` (engine/tiny/toy_train.ts, the `spade train toy` proof), it
 * says whether the model learned, from what share of wins to what, in how many updates and seconds.
 * The bar is the CLI's: the last update's mean return must reach TOY_LEARNED (cmd_train.ts exits 1
 * below it).
 */

/** The share of wins the last update must reach for the verdict "learned" (as `spade train toy`). */
const TOY_LEARNED = 0.8;

const pct = (x: number) => `${Math.round(x * 100)}%`;

/** One update's measured mean return (the share of its plays that won). */
export interface ToyPoint {
  meanReturn: number;
}

export interface ToyVerdict {
  learned: boolean;
  text: string;
}

/**
 * The verdict for a finished (or cancelled: `complete` false) run of `updates` planned updates that
 * took `seconds`. An empty curve, a flat one and one below the bar all say plainly that it did not learn.
 */
export function toyVerdict(curve: ToyPoint[], seconds: number, complete = true): ToyVerdict {
  const time = `${Math.round(seconds)} s`;
  if (!curve.length)
    return {
      learned: false,
      text: `No update finished (${time}), so there is nothing to judge yet: press start again.`,
    };
  const first = curve[0]!.meanReturn;
  const last = curve.at(-1)!.meanReturn;
  const n = curve.length;
  const span = `${pct(first)} of its plays in update 1 and ${pct(last)} in update ${n} (${time})`;
  if (last >= TOY_LEARNED && last > first)
    return { learned: true, text: `It learned: the model picked the winning digit 7 in ${span}.` };
  const why = last >= TOY_LEARNED ? 'it was already there at the start' : `below the ${pct(TOY_LEARNED)} bar`;
  const stopped = complete ? '' : ' It was stopped early; a full run takes 8 updates.';
  return { learned: false, text: `It did not learn: the winning digit 7 came up in ${span}, ${why}.${stopped}` };
}
