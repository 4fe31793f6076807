/**
 * Two compact, complete example environments written for the designer prompt: one game and
 * one tool-use task, each under 1,500 characters so that a small model's 4,096-token window
 * holds the contract, a document excerpt, one whole example and a full reply. They stand in
 * as the positive example when the memory has no complete in-band environment for a skill
 * (the seed library's programs are 3–8 KB: cut to fit, they would teach broken code).
 * tests/unit/prompts.test.ts runs both through the strict checker.
 */

export const COMPACT_GAME = `// @title Safe Dial
// @skill logical_deduction
// @difficulty medium
class SafeDialEnv {
  constructor(maxTurns = 12) { this.maxTurns = maxTurns; }
  reset(seed) {
    this.code = [0, 1, 2].map(() => 1 + Math.floor(Math.random() * 5));
    this.dials = [0, 0, 0];
    this.t = 0;
    return ['A safe has 3 dials, all at 0; each opens at a value 1-5. Turn one dial per move: \\\\boxed{dial value}, e.g. \\\\boxed{2 4}. After each move you hear how many dials are right.', {}];
  }
  step(action) {
    this.t++;
    const [d, v] = String(extractBoxed(action) ?? '').trim().split(/\\s+/).map(Number);
    const trunc = this.t >= this.maxTurns;
    if (![1, 2, 3].includes(d) || !(v >= 0 && v <= 5 && Number.isInteger(v)))
      return ['Give a dial 1-3 and a value 0-5, e.g. \\\\boxed{1 3}.', 0, false, trunc, {}];
    this.dials[d - 1] = v;
    const right = this.dials.filter((x, i) => x === this.code[i]).length;
    if (right === 3) return ['The safe opens!', 1, true, false, {}];
    return [right + ' of 3 dials are right.', right / 10, false, trunc, {}];
  }
  solution() {
    return this.code.flatMap((c, i) => (this.dials[i] === c ? [] : ['\\\\boxed{' + (i + 1) + ' ' + c + '}']));
  }
}
`;

export const COMPACT_TOOL = `// @title Parcel Locker
// @skill data_retrieval
// @difficulty medium
class ParcelLockerEnv extends ToolUseEnv {
  static tools = [
    { name: 'list_parcels', description: 'Parcels for a name', parameters: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } },
    { name: 'locker_of', description: 'Locker number of a parcel id', parameters: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] } },
  ];
  reset(seed) {
    const names = ['Ada', 'Bo', 'Cy'];
    this.parcels = names.map((n, i) => ({ id: 'P' + (100 + i * 7 + Math.floor(Math.random() * 5)), name: n, locker: 1 + Math.floor(Math.random() * 40) }));
    this.who = names[Math.floor(Math.random() * 3)];
    return this.start('A parcel locker system.', ['Which locker holds the parcel for ' + this.who + '? Answer with the number.']);
  }
  list_parcels(a) { return this.parcels.filter((p) => p.name === a.name).map((p) => p.id); }
  locker_of(a) {
    const p = this.parcels.find((q) => q.id === a.id);
    if (!p) throw new Error('no parcel ' + a.id);
    return p.locker;
  }
  checkAnswer(answer) { return Number(answer) === this.parcels.find((p) => p.name === this.who).locker; }
  solution() {
    const p = this.parcels.find((q) => q.name === this.who);
    return ['<tool_call>{"name": "list_parcels", "arguments": {"name": "' + this.who + '"}}</tool_call>',
      '<tool_call>{"name": "locker_of", "arguments": {"id": "' + p.id + '"}}</tool_call>',
      '<answer>' + p.locker + '</answer>'];
  }
}
`;
