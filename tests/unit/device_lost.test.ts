// Device loss → DeviceLostError event, without a GPU: a fake device whose `lost` resolves.
import { describe, expect, it } from 'vitest';
import { DeviceLostError } from '../../src/core/errors.ts';
import { GpuContext, type GpuReport } from '../../src/engine/runtime/device.ts';

function fakeDevice(reason: string, message: string) {
  let resolve!: (v: { reason: string; message: string }) => void;
  const lost = new Promise<{ reason: string; message: string }>((r) => (resolve = r));
  return { device: { lost, destroy() {} } as unknown as GPUDevice, lose: () => resolve({ reason, message }) };
}
const report = {} as GpuReport;

describe('GpuContext device loss', () => {
  it('turns an unexpected loss into an event and makes later calls throw', async () => {
    const { device, lose } = fakeDevice('unknown', 'driver reset');
    const ctx = new GpuContext(device, report);
    const seen: DeviceLostError[] = [];
    ctx.onLost((e) => seen.push(e));
    expect(() => ctx.throwIfLost()).not.toThrow();
    lose();
    await device.lost;
    await Promise.resolve();
    expect(seen).toHaveLength(1);
    expect(seen[0]).toBeInstanceOf(DeviceLostError);
    expect(seen[0]!.message).toBe(
      'The GPU device was lost (driver reset). Reload the page or pick a smaller model; work saved so far is kept.',
    );
    expect(() => ctx.throwIfLost()).toThrow(DeviceLostError);
  });

  it('ignores a loss we caused with destroy()', async () => {
    const { device, lose } = fakeDevice('destroyed', '');
    const ctx = new GpuContext(device, report);
    const seen: unknown[] = [];
    const off = ctx.onLost((e) => seen.push(e));
    lose();
    await device.lost;
    await Promise.resolve();
    expect(seen).toEqual([]);
    expect(ctx.lostError).toBeNull();
    off();
  });
});
