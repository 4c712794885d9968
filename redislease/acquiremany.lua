-- acquiremany.lua: a batch of acquisitions that share a holder, TTL, queue
-- mode and sharing. KEYS: the leases; ARGV: max, id, name, ms, queue and
-- shared (as acquire's), then each request's token. Returns one reply, or
-- error reply, per request. A lease's other keys are its name and a suffix
-- of acquireParts (one slot: a batch runs on a single node only).
-- The common case, an exclusive request for a free key when none of the
-- batch's keys has a queue, is take's: one MGET and one EXISTS read the whole
-- batch, one MSET writes its fence counters, and each grant costs one SET.
local max, id, name, ms, queue, shared = unpack(ARGV, 1, 6)
local lf, qs = {}, {}
for i, lk in ipairs(KEYS) do
  lf[2 * i - 1], lf[2 * i], qs[i] = lk, lk .. acquireParts[2], lk .. acquireParts[3]
end
local got, queued = redis.call('MGET', unpack(lf)), redis.call('EXISTS', unpack(qs)) > 0
local res = {}
for i, lk in ipairs(KEYS) do
  if queued or got[2 * i - 1] or shared == '1' then
    res[i] = try(acquire, keysOf(lk, acquireParts), ARGV[6 + i], name, ms, queue, max, id, shared)
  else
    res[i] = try(take, lk, lf[2 * i], got[2 * i], ARGV[6 + i], name, ms)
  end
end
saveFences()
return res
