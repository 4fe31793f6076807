// @title Lantern Lock
// @setting games
// @skill logical_deduction
// @difficulty medium
// @hint Early probes that repeat one or two colours tell you which colours are present; then move single lanterns around and watch how the glow and flicker counts change.

// A Mastermind-style lock: find the hidden colours of four lanterns from glow/flicker feedback.
class LanternLockEnv {
  constructor(maxTurns = 12) {
    this.maxTurns = maxTurns;
    this.colours = 'RGBYWP';
    this.names = { red: 'R', green: 'G', blue: 'B', yellow: 'Y', white: 'W', purple: 'P' };
  }

  reset(seed) {
    this.turn = 0;
    this.done = false;
    this.history = [];
    this.secret = '';
    for (let i = 0; i < 4; i++) this.secret += this.colours[Math.floor(Math.random() * 6)];
    return [
      'A vault door carries four lanterns in a row (positions 1-4). Each hides a colour: ' +
        'R red, G green, B blue, Y yellow, W white, P purple (colours may repeat).\n' +
        'Light a combination and the door answers: each GLOW is a lantern with the right colour in the right place; ' +
        'each FLICKER is a right colour in the wrong place.\n' +
        'Commands: \\boxed{try RGBY} (any four letters, spaces allowed). Matching all four opens the vault.\n' +
        `You have ${this.maxTurns} turns.`,
      {},
    ];
  }

  parse(rest) {
    const words = rest.split(/[\s,]+/).filter(Boolean);
    let letters = '';
    if (words.length === 1) letters = words[0].toUpperCase();
    else for (const w of words) letters += this.names[w] || w.toUpperCase();
    if (letters.length !== 4) return null;
    for (const ch of letters) if (!this.colours.includes(ch)) return null;
    return letters;
  }

  score(guess) {
    let glow = 0;
    const a = {};
    const b = {};
    for (let i = 0; i < 4; i++) {
      if (guess[i] === this.secret[i]) glow++;
      else {
        a[guess[i]] = (a[guess[i]] || 0) + 1;
        b[this.secret[i]] = (b[this.secret[i]] || 0) + 1;
      }
    }
    let flicker = 0;
    for (const k in a) flicker += Math.min(a[k], b[k] || 0);
    return [glow, flicker];
  }

  out(text, reward, terminated) {
    if (terminated) this.done = true;
    const truncated = !terminated && this.turn >= this.maxTurns;
    if (truncated) {
      this.done = true;
      text += `\nOut of turns. The lanterns were ${this.secret}.`;
    }
    return [text, reward, terminated, truncated, { turn: this.turn }];
  }

  step(action) {
    if (this.done) return ['The episode is over. Reset to play again.', 0, true, false, {}];
    this.turn++;
    const cmd = extractBoxed(action);
    const help = 'Commands: \\boxed{try RGBY} using four of R G B Y W P.';
    if (cmd === null) return this.out('Reply with one command inside \\boxed{...}. ' + help, 0, false);
    const m = /^(try|guess|light)\s+(.{1,60})$/.exec(cmd.toLowerCase().replace(/\s+/g, ' ').trim());
    const guess = m ? this.parse(m[2]) : null;
    if (!guess) return this.out(`"${cmd.slice(0, 40)}" could not be read. ${help}`, 0, false);
    const [glow, flicker] = this.score(guess);
    if (glow === 4) return this.out(`${guess}: all four lanterns blaze and the vault swings open!`, 1, true);
    this.history.push(`${guess} -> ${glow} glow, ${flicker} flicker`);
    const left = this.maxTurns - this.turn;
    return this.out(
      `${guess}: ${glow} glow, ${flicker} flicker.\nProbes so far:\n${this.history.join('\n')}\n` +
        `${left} turn(s) left. ${help}`,
      0,
      false,
    );
  }

  solution() {
    const probes = ['RRGG', 'BBYY', 'WWPP', 'RGBY'].filter((p) => p !== this.secret).slice(0, 2);
    return [...probes, this.secret].map((g) => `\\boxed{try ${g}}`);
  }
}
