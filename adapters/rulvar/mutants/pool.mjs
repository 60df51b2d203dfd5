//! The kill matrix's bounded pool (`matrix.mjs`): hunts that mostly wait on their adapters and
//! soaks run a few at a time, their rows kept in the mutants' order.

/**
 * `fn(item, index)` over `items`, at most `width` at once, each taking the next item; the
 * results in the items' order. After a failure no new item starts, those running are waited
 * for (so no process they started outlives the pool), and the failure of the lowest index is
 * thrown.
 */
export async function pool(items, width, fn) {
  if (!Number.isInteger(width) || width < 1) throw new RangeError(`a pool's width must be a whole number of at least 1, got ${width}`);
  const results = new Array(items.length);
  const failures = [];
  let next = 0;
  const worker = async () => {
    while (failures.length === 0 && next < items.length) {
      const i = next;
      next += 1;
      try {
        results[i] = await fn(items[i], i);
      } catch (e) {
        failures.push([i, e]);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(width, items.length)) }, worker));
  if (failures.length > 0) throw failures.sort((a, b) => a[0] - b[0])[0][1];
  return results;
}
