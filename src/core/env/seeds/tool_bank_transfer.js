// @title Rent Day at Copper Bank
// @setting tool_use
// @skill state_modification
// @difficulty medium
// @hint Check balances before moving money, compute the exact difference, and confirm the result afterwards; overshoots can be moved back.

// A tiny online bank: top up checking to an exact amount, then pay a bill and report what is left.
class BankTransferEnv extends ToolUseEnv {
  static tools = [
    {
      name: 'list_accounts',
      description: 'Your accounts and saved payees (ids and names, no balances).',
      parameters: { type: 'object', properties: {} },
    },
    {
      name: 'get_balance',
      description: 'Current balance of one of your own accounts.',
      parameters: {
        type: 'object',
        properties: { account: { type: 'string', description: 'account id or name, e.g. "savings"' } },
        required: ['account'],
      },
    },
    {
      name: 'transfer',
      description: 'Move money from one of your accounts to another account or a saved payee.',
      parameters: {
        type: 'object',
        properties: {
          from: { type: 'string', description: 'id or name of your source account' },
          to: { type: 'string', description: 'id or name of the destination account or payee' },
          amount: { type: 'number', description: 'amount in dollars, at most 2 decimals' },
        },
        required: ['from', 'to', 'amount'],
      },
    },
    {
      name: 'get_bill',
      description: 'The amount you currently owe a saved payee.',
      parameters: {
        type: 'object',
        properties: { payee: { type: 'string', description: 'payee id or name' } },
        required: ['payee'],
      },
    },
  ];

  reset() {
    const rnd = (lo, hi) => lo + Math.floor(Math.random() * (hi - lo + 1));
    const digits = () => String(rnd(1000, 9999));
    this.accounts = [
      { id: 'CHK-' + digits(), name: 'Everyday Checking', own: true, cents: rnd(200, 900) * 100 + rnd(0, 99) },
      { id: 'SAV-' + digits(), name: 'Rainy Day Savings', own: true, cents: rnd(3000, 6000) * 100 + rnd(0, 99) },
      { id: 'PAY-LANDLORD', name: 'Landlord (Mrs. Pemberton)', own: false, cents: 0 },
      { id: 'PAY-POWERCO', name: 'PowerCo Electricity', own: false, cents: 0 },
    ];
    this.rent = rnd(11, 19) * 100 * 100;
    this.bill = rnd(60, 240) * 100 + rnd(0, 99);
    this.start0 = this.accounts.map((a) => a.cents);
    return this.start(
      'You handle your own banking through the Copper Bank app. Rent is collected from your checking account tomorrow morning.',
      [
        'Rent is $' +
          this.rent / 100 +
          '. Move exactly the missing amount from savings into checking so that checking holds exactly $' +
          this.rent / 100 +
          '. Answer "done" when finished.',
        'Your PowerCo electricity bill has arrived. Pay it in full from savings, then answer with the savings balance.',
      ],
    );
  }

  money(cents) {
    return '$' + (cents / 100).toFixed(2);
  }

  find(value, field) {
    if (typeof value !== 'string' || !value.trim()) throw new Error('"' + field + '" must be an account id or name');
    const v = value.trim().toLowerCase();
    let acc = this.accounts.find((a) => a.id.toLowerCase() === v || a.name.toLowerCase() === v);
    const loose = this.accounts.filter((a) => a.name.toLowerCase().includes(v));
    if (!acc && loose.length === 1) acc = loose[0];
    if (!acc) throw new Error('no account or payee "' + value.trim() + '"; see list_accounts');
    return acc;
  }

  list_accounts() {
    return this.accounts.map((a) => ({ id: a.id, name: a.name, type: a.own ? 'your account' : 'payee' }));
  }

  get_balance(args) {
    const acc = this.find(args.account, 'account');
    if (!acc.own) throw new Error(acc.name + ' is a payee; you can only see your own balances');
    return acc.name + ' (' + acc.id + '): ' + this.money(acc.cents);
  }

  transfer(args) {
    const from = this.find(args.from, 'from');
    const to = this.find(args.to, 'to');
    const amount = typeof args.amount === 'string' ? Number(args.amount.replace(/[$,\s]/g, '')) : args.amount;
    if (typeof amount !== 'number' || !Number.isFinite(amount) || amount <= 0)
      throw new Error('"amount" must be a positive number of dollars');
    const cents = Math.round(amount * 100);
    if (Math.abs(cents - amount * 100) > 1e-6) throw new Error('"amount" can have at most 2 decimals');
    if (!from.own) throw new Error('you cannot send money from a payee');
    if (from === to) throw new Error('source and destination are the same account');
    if (cents > from.cents) throw new Error('insufficient funds: ' + from.name + ' holds ' + this.money(from.cents));
    from.cents -= cents;
    to.cents += cents;
    return 'Sent ' + this.money(cents) + ' from ' + from.name + ' to ' + to.name + '.';
  }

  get_bill(args) {
    const acc = this.find(args.payee, 'payee');
    if (acc.id === 'PAY-POWERCO') return 'PowerCo: ' + this.money(Math.max(0, this.bill - acc.cents)) + ' due.';
    if (acc.id === 'PAY-LANDLORD')
      return 'Landlord: rent of ' + this.money(this.rent) + ' is collected from checking tomorrow.';
    throw new Error(acc.name + ' is your own account, not a payee');
  }

  checkAnswer(answer, stage) {
    const [chk, sav, landlord, power] = this.accounts.map((a) => a.cents);
    const total = this.start0[0] + this.start0[1];
    if (chk !== this.rent || landlord !== 0) return false;
    if (stage === 0) return power === 0 && chk + sav === total;
    const m = /-?\d+(\.\d+)?/.exec(answer.replace(/[,$\s]/g, ''));
    return power === this.bill && m !== null && Math.round(Number(m[0]) * 100) === sav;
  }

  solution() {
    const call = (name, args) => '<tool_call>' + JSON.stringify({ name, arguments: args }) + '</tool_call>';
    const [chk, sav] = this.accounts;
    const topUp = this.rent - this.start0[0];
    return [
      call('get_balance', { account: chk.id }),
      call('transfer', { from: sav.id, to: chk.id, amount: topUp / 100 }),
      '<answer>done</answer>',
      call('get_bill', { payee: 'PAY-POWERCO' }),
      call('transfer', { from: sav.id, to: 'PAY-POWERCO', amount: this.bill / 100 }),
      '<answer>' + ((this.start0[1] - topUp - this.bill) / 100).toFixed(2) + '</answer>',
    ];
  }
}
