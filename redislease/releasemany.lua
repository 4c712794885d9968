-- releasemany.lua: a batch of releases that share sharing. KEYS: the
-- leases; ARGV: the channel, the length of the store's prefix, shared, then
-- each request's token. Returns one reply, or error reply, per request. A
-- lease's other keys are its name and a suffix of releaseParts (one slot: a
-- batch runs on a single node only).
-- The common case, an exclusive release of a key that holds a lease when
-- none of the batch's keys has a queue, is drop's: one MGET and one EXISTS
-- read the whole batch, one DEL frees what the tokens held, and each release
-- is announced only if the channel has subscribers (PUBSUB NUMSUB).
local channel, plen, shared = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local qs = {}
for i, lk in ipairs(KEYS) do
  qs[i] = lk .. releaseParts[2]
end
local got, queued = redis.call('MGET', unpack(KEYS)), redis.call('EXISTS', unpack(qs)) > 0
local res, gone = {}, {}
for i, lk in ipairs(KEYS) do
  if queued or not got[i] or shared == '1' then
    res[i] = try(release, keysOf(lk, releaseParts), ARGV[3 + i], channel, keyName(lk, plen), shared)
  else
    res[i] = try(drop, lk, got[i], ARGV[3 + i])
    if res[i] == 1 then
      table.insert(gone, lk)
    end
  end
end
if #gone > 0 then
  redis.call('DEL', unpack(gone))
  if redis.call('PUBSUB', 'NUMSUB', channel)[2] > 0 then
    for _, lk in ipairs(gone) do
      redis.call('PUBLISH', channel, keyName(lk, plen))
    end
  end
end
return res
