// Unit tests of backup schedules: the one due time owed (missed ones taken once, at the latest), and the checks of the `backup` field.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { checkSchedule, dueTime } from '../../src/backups/schedule.js';

describe('backup schedules', () => {
  test('the latest due time after the last one taken, none before it is due', () => {
    const at = (iso: string) => new Date(iso);
    assert.equal(dueTime('0 3 * * *', at('2026-11-28T03:00:00Z'), at('2026-11-29T02:59:59Z')), undefined, 'not yet due');
    assert.equal(dueTime('0 3 * * *', at('2026-11-28T03:00:00Z'), at('2026-11-29T03:00:00Z'))?.toISOString(), '2026-11-29T03:00:00.000Z');
    assert.equal(dueTime('0 3 * * *', at('2026-11-20T03:00:00Z'), at('2026-11-29T10:00:00Z'))?.toISOString(), '2026-11-29T03:00:00.000Z', 'a week missed: one backup, the latest');
    assert.equal(dueTime('*/5 * * * *', at('2026-11-28T10:00:00Z'), at('2026-11-28T10:07:00Z'))?.toISOString(), '2026-11-28T10:05:00.000Z');
  });

  test('the backup field: a cron expression, a destination, keep 1 to 365; pitr a boolean', () => {
    assert.deepEqual(checkSchedule({ schedule: '0 3 * * *', destination_id: 'd', keep: 7 }), { schedule: '0 3 * * *', destination_id: 'd', keep: 7, pitr: false });
    assert.deepEqual(checkSchedule({ schedule: '0 3 * * *', destination_id: 'd', pitr: true }), { schedule: '0 3 * * *', destination_id: 'd', keep: 7, pitr: true });
    for (const bad of [{ schedule: 'every day', destination_id: 'd' }, { schedule: '0 3 * * *' }, { schedule: '0 3 * * *', destination_id: 'd', keep: 0 }, { schedule: '0 3 * * *', destination_id: 'd', keep: 366 }, { schedule: '0 3 * * *', destination_id: 'd', keep: 1.5 }, { schedule: '0 3 * * *', destination_id: 'd', pitr: 'yes' }]) {
      assert.throws(() => checkSchedule(bad), { code: 'validation_error' }, JSON.stringify(bad));
    }
  });
});
