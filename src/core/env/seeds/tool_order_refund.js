// @title Helpdesk Refund Run
// @setting tool_use
// @skill multi_step_workflows
// @difficulty medium
// @hint Follow the chain: email to customer id, customer id to orders, order to items. Check dates and delivery status before refunding anything.

// A support desk back office: find the customer, the right order and item, and issue exactly one refund.
class OrderRefundEnv extends ToolUseEnv {
  static tools = [
    {
      name: 'find_customer',
      description: 'Look up a customer by email address.',
      parameters: { type: 'object', properties: { email: { type: 'string' } }, required: ['email'] },
    },
    {
      name: 'list_orders',
      description: "A customer's orders: id, date, status and total.",
      parameters: { type: 'object', properties: { customer_id: { type: 'string' } }, required: ['customer_id'] },
    },
    {
      name: 'get_order',
      description: 'The line items of one order (sku, name, quantity, unit price).',
      parameters: { type: 'object', properties: { order_id: { type: 'string' } }, required: ['order_id'] },
    },
    {
      name: 'issue_refund',
      description: 'Refund one line of a delivered order. Returns the refund id.',
      parameters: {
        type: 'object',
        properties: {
          order_id: { type: 'string' },
          sku: { type: 'string' },
          quantity: { type: 'integer', description: 'units to refund (default: the whole line)' },
        },
        required: ['order_id', 'sku'],
      },
    },
  ];

  reset() {
    const rnd = (n) => Math.floor(Math.random() * n);
    const people = [
      ['Priya', 'Nair'],
      ['Jonas', 'Berg'],
      ['Lucia', 'Ferreira'],
      ['Kenji', 'Mori'],
      ['Ada', 'Okoye'],
    ];
    const [first, last] = people[rnd(people.length)];
    this.email = first.toLowerCase() + '.' + last.toLowerCase() + '@example.com';
    this.customer = 'C-' + (10000 + rnd(90000));
    const catalogue = [
      ['MUG-01', 'Speckled stoneware mug', 14],
      ['PLT-07', 'Dinner plate, set of 4', 48],
      ['BWL-03', 'Noodle bowl', 19],
      ['TPT-02', 'Glass teapot', 36],
      ['VAS-05', 'Bud vase', 22],
      ['JAR-09', 'Honey jar with dipper', 12],
    ];
    this.item = catalogue[rnd(catalogue.length)];
    const others = catalogue.filter((c) => c !== this.item);
    const line = (c) => ({ sku: c[0], name: c[1], quantity: 1 + rnd(3), unit_price: c[2] });
    const month = ['09', '10'][rnd(2)];
    const statuses = ['delivered', 'delivered', 'delivered', 'processing'];
    this.orders = statuses.map((status, i) => {
      const items = [line(others[(i * 2) % others.length]), line(others[(i * 2 + 1) % others.length])];
      if (i !== 1 || rnd(2)) items.splice(rnd(3), 0, line(this.item));
      return { id: 'ORD-' + (5000 + i * 137 + rnd(100)), date: '2023-' + month + '-' + (10 + i * 5), status, items };
    });
    // make sure the target line is in the latest delivered order (index 2)
    if (!this.orders[2].items.some((l) => l.sku === this.item[0])) this.orders[2].items.push(line(this.item));
    this.target = this.orders[2];
    this.line = this.target.items.find((l) => l.sku === this.item[0]);
    this.refundBase = 70000 + rnd(20000);
    this.refunds = [];
    const listed = this.orders.slice();
    for (let i = listed.length - 1; i > 0; i--) {
      const j = rnd(i + 1);
      [listed[i], listed[j]] = [listed[j], listed[i]];
    }
    this.listed = listed;
    return this.start(
      'You work the helpdesk of Kiln & Co, a small online pottery shop. A ticket has just come in from ' +
        this.email +
        ': "The ' +
        this.item[1].toLowerCase() +
        ' in my most recent delivered order arrived cracked. Please refund it."',
      'Refund that whole order line (every unit of it) and nothing else. Answer with the refund id.',
    );
  }

  text(v, key) {
    if (typeof v !== 'string' || !v.trim()) throw new Error('"' + key + '" must be a non-empty string');
    return v.trim().toUpperCase();
  }

  order(id) {
    const o = this.orders.find((x) => x.id === this.text(id, 'order_id'));
    if (!o) throw new Error('no order ' + String(id).trim() + '; order ids come from list_orders');
    return o;
  }

  find_customer(args) {
    const e = this.text(args.email, 'email').toLowerCase();
    if (e !== this.email) throw new Error('no customer with email ' + e);
    return { customer_id: this.customer, email: this.email, member_since: '2021' };
  }

  list_orders(args) {
    if (this.text(args.customer_id, 'customer_id') !== this.customer)
      throw new Error('unknown customer id; look it up with find_customer');
    return this.listed.map((o) => ({
      order_id: o.id,
      date: o.date,
      status: o.status,
      total: o.items.reduce((s, l) => s + l.quantity * l.unit_price, 0),
    }));
  }

  get_order(args) {
    const o = this.order(args.order_id);
    return { order_id: o.id, date: o.date, status: o.status, items: o.items };
  }

  issue_refund(args) {
    const o = this.order(args.order_id);
    const sku = this.text(args.sku, 'sku');
    const l = o.items.find((x) => x.sku === sku);
    if (!l) throw new Error('order ' + o.id + ' has no line with sku ' + sku);
    if (o.status !== 'delivered') throw new Error('order ' + o.id + ' is still ' + o.status + '; cancel it instead');
    const q = args.quantity === undefined ? l.quantity : Number(args.quantity);
    if (!Number.isInteger(q) || q < 1) throw new Error('"quantity" must be a whole number of at least 1');
    const done = this.refunds.filter((r) => r.order === o.id && r.sku === sku).reduce((s, r) => s + r.quantity, 0);
    if (done + q > l.quantity)
      throw new Error('only ' + (l.quantity - done) + ' unit(s) of ' + sku + ' left to refund');
    const id = 'RF-' + (this.refundBase + this.refunds.length);
    this.refunds.push({ id, order: o.id, sku, quantity: q });
    return { refund_id: id, amount: q * l.unit_price, order_id: o.id, sku };
  }

  checkAnswer(answer) {
    const good = this.refunds.every((r) => r.order === this.target.id && r.sku === this.line.sku);
    const units = this.refunds.reduce((s, r) => s + r.quantity, 0);
    const ids = this.refunds.map((r) => r.id);
    return good && units === this.line.quantity && ids.includes(answer.trim().toUpperCase());
  }

  solution() {
    const call = (name, args) => '<tool_call>' + JSON.stringify({ name, arguments: args }) + '</tool_call>';
    return [
      call('find_customer', { email: this.email }),
      call('list_orders', { customer_id: this.customer }),
      call('get_order', { order_id: this.target.id }),
      call('issue_refund', { order_id: this.target.id, sku: this.line.sku }),
      '<answer>RF-' + this.refundBase + '</answer>',
    ];
  }
}
